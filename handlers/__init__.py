"""Lambda handlers for the exactly-once patterns; packaged whole by components.lambda_asset."""
