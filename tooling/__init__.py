"""The repository's tooling shared by the tests, the demo and the benchmarks: clients of a
LocalStack deployment with their waiting helpers (`clients`), and S3 events as AWS
delivers them (`events`). Not part of the installed package."""
