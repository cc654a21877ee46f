"""Seed 000's context_policy.yaml (section 3.3) as the article writes it: one strategy a
policy, `multi_agent_consensus` for code_gen and test_gen, `project_scope_fallback` else."""

SEED_POLICY = """\
policies:
  - name: ecommerce_api_dev
    match:
      project_id: ecommerce_backend_v2
      agent_roles: [code_gen, test_gen]
    strategy: multi_agent_consensus
    parameters:
      agents: [code_gen, test_gen]
      consensus_threshold: 0.8 # 关系置信度需 80% 才采纳
  - name: default_fallback
    match:
      default: true
    strategy: project_scope_fallback
    parameters:
      fallback_depth: 5
"""
