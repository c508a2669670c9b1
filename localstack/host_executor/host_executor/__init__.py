"""LocalStack host-mode plugins: a Lambda executor that runs Python handlers as host
subprocesses (`executor`), and caches that keep Step Functions off the CPU
(`step_functions`)."""
