print("tokengate")
