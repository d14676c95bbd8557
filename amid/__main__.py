"""`python -m amid …` is the `amid` command."""

from amid.server.cli import main

main()
