"""The built-in OpenAI-compatible simulator and its simulated dcgm-exporter (the test oracle)."""
