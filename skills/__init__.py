"""Bundled Agent Skills folders (SKILL.md + optional executable exports), shipped as package data."""

from pathlib import Path

ROOT = Path(__file__).parent
