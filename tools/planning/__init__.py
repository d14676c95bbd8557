"""Data-conditioned method planning: foundation-model search and lane templates (plain Python)."""

from amid.tools.planning.fm_query import ModelHit, query_models

__all__ = ["ModelHit", "query_models"]
