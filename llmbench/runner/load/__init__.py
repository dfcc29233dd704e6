"""Load generation: closed- and open-loop slots, multi-turn sessions, worker processes."""
