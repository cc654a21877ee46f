"""Knowledge-base versions of one project (anchor/kb_versions.py): record a version of the
ingested repositories, pin one (every search and assembly of the project sees it), unpin.

An unknown version answers 404, a name recorded before or not a version name 422.
"""

from __future__ import annotations

from fastapi import APIRouter, status

from .deps import ReadProject, Rt, WriteProject
from .schemas import KbPinIn, KbPinOut, KbTagIn, KbTagOut, KbUnpinOut

__all__ = ["router"]

router = APIRouter(prefix="/v1/projects/{project_id}/kb", tags=["knowledge base"])


@router.get("/versions", response_model=list[KbTagOut])
def knowledge_tags(pid: ReadProject, rt: Rt) -> list[KbTagOut]:
    """The recorded versions, oldest first; `pinned` marks the one searches see."""
    return [KbTagOut(**t.to_dict()) for t in rt.cb.knowledge_tags(project=pid)]


@router.post("/versions", response_model=KbTagOut, status_code=status.HTTP_201_CREATED)
def tag_knowledge(pid: WriteProject, body: KbTagIn, rt: Rt) -> KbTagOut:
    """Record the current version of every unit of the ingested repositories."""
    tag = rt.cb.tag_knowledge(body.name, repos=body.repos, project=pid)
    return KbTagOut(**tag.to_dict())


@router.put("/pin", response_model=KbPinOut)
def pin_knowledge(pid: WriteProject, body: KbPinIn, rt: Rt) -> KbPinOut:
    """Make every search and assembly of the project see the knowledge base as of `tag`."""
    return KbPinOut(**rt.cb.pin_knowledge(body.tag, project=pid).to_dict())


@router.delete("/pin", response_model=KbUnpinOut)
def unpin_knowledge(pid: WriteProject, rt: Rt) -> KbUnpinOut:
    """Back to the latest knowledge base."""
    return KbUnpinOut(unpinned=rt.cb.unpin_knowledge(project=pid))
