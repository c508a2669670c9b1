"""LocalStack host-mode plugins: a Lambda executor that runs Python handlers as host
subprocesses (`executor`), caches that keep Step Functions off the CPU
(`step_functions`), and fault injection for the reliability suite (`faults`)."""
