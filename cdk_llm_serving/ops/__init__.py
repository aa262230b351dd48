"""Operations around a pool endpoint with boto3: fleet status, inference recommendations."""
