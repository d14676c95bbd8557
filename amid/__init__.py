"""AMID: an MCP tool server for autonomous, auditable medical-imaging model development.

The distribution's one import namespace. Its three packages keep their folders at the top of the
repository (`server/`, `tools/`, `registry/`); in a checkout they appear here as links, in an
installed wheel as folders. The layers they form, and the contracts CI checks on them, are in
docs/ARCHITECTURE.md §3.
"""

from pathlib import Path

# The folder that holds this package: what a subprocess started with `-m amid.…` needs as its working
# directory (or on its sys.path) when it cannot rely on the installation, e.g. inside a sandbox.
PACKAGE_ROOT = Path(__file__).parent.parent
