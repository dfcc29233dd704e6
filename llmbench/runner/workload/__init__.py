"""The workload: the request bodies a load point sends, prepared before the first send."""
