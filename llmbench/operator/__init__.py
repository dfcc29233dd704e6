"""The kopf operator that turns ``LLMBenchmark`` resources into runner Jobs."""

__all__: list[str] = []
