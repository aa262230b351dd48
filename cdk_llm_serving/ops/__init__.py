"""Operations with boto3 and the command line: fleet status, recommendations, smoke tests.

Plain Python (no CDK import); the constructs never import this package.
"""
