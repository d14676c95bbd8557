"""Managed workers (docs/ARCHITECTURE.md §9): headless agent CLIs the supervisor starts in
their worktrees, watches, interrupts and resumes with heartbeat prompts, and retires.

    backend.py   a backend's data made concrete: argv, config files, session ids, exit classes (pure)
    process.py   one running CLI: its process group, its output read line by line
    pool.py      WorkerPool: worktrees and tokens, start, deliver, watchdog, crash breaker, stop
    scripted.py  the built-in scripted worker (a deterministic headless "CLI")
"""
