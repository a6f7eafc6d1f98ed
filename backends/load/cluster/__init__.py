"""``ttft bench --cluster``: the load driver on the nodes of a Ray cluster (imported only with ``--cluster``)."""
