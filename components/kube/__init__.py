"""The Kubernetes client layer: the client, waits, tokens, HAMi's reasons as the API reports them."""
