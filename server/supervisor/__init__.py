"""The supervisor (`amid supervise`, docs/ARCHITECTURE.md §9): a separate process, an MCP client of the server with a
supervisor token, that moves the stages, promotes lanes, sends heartbeats and finalizes the run.

    state.py       the run as `run_evidence` shows it, and what counts
    promotion.py   ranking lanes by verified evidence; the challenger within noise
    stages.py      when exploration, exploitation and finalization end
    heartbeats.py  reflection, consolidation, plateau and stage prompts, each keyed by its cause
    loop.py        one tick: read the evidence, send due heartbeats, apply due decisions
    cli.py         `amid supervise`
"""
