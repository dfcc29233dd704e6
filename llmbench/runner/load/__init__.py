"""Load generation: closed- and open-loop slots, and the workload (prompts) they send."""
