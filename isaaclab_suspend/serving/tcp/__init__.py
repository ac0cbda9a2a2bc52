"""The ``tcp`` wire, the project's own: length-prefixed JSON headers and raw arrays (:mod:`.protocol`), the server
(:mod:`.server`) and its client chunk model (:mod:`.client`)."""
