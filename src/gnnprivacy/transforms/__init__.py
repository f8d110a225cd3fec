"""Graph transforms that privatise a graph (each records its privacy event)."""
