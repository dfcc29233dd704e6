"""One load point: run it, turn its records into GenAI-Perf statistics, write its artefacts."""
