"""The command line and its operations (boto3, HTTP): plain Python, never imported by the constructs."""
