"""The endpoint core both serving paths import: endpoint API, metrics, fleet utilization,
asynchronous inference and the dashboard widgets they share."""
