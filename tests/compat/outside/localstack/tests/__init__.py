name = "tests"
