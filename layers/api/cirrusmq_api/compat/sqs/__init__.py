"""The SQS API (AWS JSON 1.0 and the query protocol) over CirrusMQ's broker services.

``handler.handle`` answers one API Gateway event; ``functions/sqs/app.py`` is its Lambda.
docs/compat.md says what is mapped how.
"""
