"""cave: LLM agents that act by writing Python in a persistent runtime."""

__version__ = "0.1.0"
