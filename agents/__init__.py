"""Role definitions (YAML + prompts), shipped as package data."""

from pathlib import Path

ROOT = Path(__file__).parent
