"""A query's conjunct parts: the pure splitter, and search fusing each part's ranking
(every backend: the `cb` fixture is parametrised)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.query_decomp import query_conjuncts


def test_names_joined_by_and_are_parts() -> None:
    assert query_conjuncts("What movies have both Joanna and Nate seen?") == [
        "What movies have Joanna seen?",
        "What movies have Nate seen?",
    ]
    assert query_conjuncts("Did Jon and Gina both participate in dance competitions?") == [
        "Did Jon participate in dance competitions?",
        "Did Gina participate in dance competitions?",
    ]


def test_phrases_and_lists_keep_the_shared_words() -> None:
    assert query_conjuncts("What did Caroline and her family do while camping?") == [
        "What did Caroline do while camping?",
        "What did her family do while camping?",
    ]
    assert query_conjuncts(
        "What kind of counseling and mental health services is Caroline interested in?"
    ) == [
        "What kind of counseling is Caroline interested in?",
        "What kind of mental health services is Caroline interested in?",
    ]
    assert query_conjuncts("When did Caroline meet up with her friends, family, and mentors?") == [
        "When did Caroline meet up with her friends?",
        "When did Caroline meet up with her family?",
        "When did Caroline meet up with her mentors?",
    ]
    # "or" asks which one: one turn answers it
    assert query_conjuncts("Are we on npm or pnpm?") == []


def test_chinese_conjunctions_and_markers() -> None:
    assert query_conjuncts("五环内白天和夜间的平均地表温度这几年各升了多少？") == [
        "五环内白天的平均地表温度这几年升了多少？",
        "五环内夜间的平均地表温度这几年升了多少？",
    ]
    assert query_conjuncts("第三次事故后，物业客户和普通用户分别怎么补偿？") == [
        "第三次事故后，物业客户怎么补偿？",
        "第三次事故后，物业普通用户怎么补偿？",
    ]
    assert query_conjuncts("水电验收时的打压测试参数和结果是什么？") == [
        "水电验收时的打压测试参数是什么？",
        "水电验收时的打压测试结果是什么？",
    ]
    # "、" alone joins the two things asked
    assert query_conjuncts("健康助理说哪项要注意、怎么办？") == [
        "健康助理说哪项要注意？",
        "健康助理说哪项要怎么办？",
    ]
    # 还是 asks which one; 和 opening a clause compares ("with"); inside a word it is none
    assert query_conjuncts("出国上网用随身WiFi还是SIM卡？") == []
    assert query_conjuncts("规划写进文档的超时时间，和后端实现的一致吗？") == []
    assert query_conjuncts("和平路那家店几点开门？") == []


def test_clauses_joined_by_and_are_the_halves() -> None:
    # the second half lacks the subject: it gets the first half's name
    assert query_conjuncts("What did Melanie paint and what did she make?") == [
        "What did Melanie paint",
        "what did she make? Melanie",
    ]
    assert query_conjuncts("How much was refunded and when will the money arrive?") == [
        "How much was refunded",
        "when will the money arrive?",
    ]
    # a half that says too little on its own: nothing to split
    assert query_conjuncts("when did she go camping and where") == []


def test_a_query_with_nothing_coordinated_has_no_parts() -> None:
    assert query_conjuncts("What is Caroline's identity?") == []
    assert query_conjuncts("第一批上线的是哪几家门店？") == []
    assert query_conjuncts("and the summer seats?") == []
    # a long list is a description, searched whole
    assert query_conjuncts("Did we buy eggs, milk, bread, butter, and jam?") == []
    # a pasted text is not a question: not read word by word
    assert query_conjuncts("cache and index " * 500) == []
    assert query_conjuncts("缓存和索引" * 500) == []


def test_search_gives_each_coordinated_actor_a_place(cb: ContextBase) -> None:
    def say(agent: str, text: str) -> str:
        return cb.record("user_message", session_id=agent, text=text, agent_id=agent).id

    # Someone else's movie talk fills the whole query's ranking; the other coordinated
    # actor's one movie turn, longer and about more, ranks below it.
    say("joanna", "joanna: seen the movie Alien with my sister")
    films = ("Heat", "Up", "Jaws", "Rocky", "Fargo", "Psycho", "Brazil", "Tron", "Coco", "Ran")
    for n, film in enumerate(films):
        say("sam", f"sam: seen the movie {film} on screen {n}")
    for n in range(8):
        say("nate", f"nate here: tournament prep, round {n} of the gaming league")
    nate = say(
        "nate",
        "nate here: after the tournament and the long drive home I finally went to the "
        "cinema with friends from the club and we have seen a long movie about dreams "
        "inside dreams, then we had dinner and talked about the next tournament rounds",
    )
    for n in range(20):  # words every turn has are worth nothing: most turns are elsewhere
        say("kim", f"kim here: the garden needs water, bed {n} of the allotment")
    query = "What movies have both Joanna and Nate seen?"
    options = {"semantic": False, "subject_actor": True, "actor_free_query": True}

    def nate_rank(**more: float) -> int:
        found = cb.search(query, config=get_preset("hybrid", **options, **more)).considered
        return [c.item.owner_id for c in found].index(nate)

    # the part for Nate searched his events only: his movie turn is his best, and passes
    # the turns of someone the question does not ask about
    plain, split = nate_rank(), nate_rank(decomp_weight=0.25)
    assert plain > 8 and split < 5
