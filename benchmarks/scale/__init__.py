"""Growth benchmarks (issue 25): how AMID's cost grows with data, ledger, agents, reviews and jobs."""
