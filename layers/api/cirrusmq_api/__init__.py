"""CirrusMQ's HTTP adapter: Powertools routers, wire schemas and the error mapping.

The functions in ``functions/`` each build an app from the routers they serve.
"""
