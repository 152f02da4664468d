"""What Prometheus scrapes: `collectors` builds every family from the state at each scrape,
`exposition` writes the bodies in prometheus_client's own formats.
"""
