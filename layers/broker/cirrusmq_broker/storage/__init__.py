"""Storage: the only package that talks to AWS. One module per DynamoDB/S3 concern."""
