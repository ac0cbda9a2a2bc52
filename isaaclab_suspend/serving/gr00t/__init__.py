"""The ``gr00t`` wire: GR00T's ZeroMQ protocol, both ways: a client chunk model of a GR00T policy server
(:mod:`.client`), a server GR00T's ``PolicyClient`` can call (:mod:`.server`), the array codec (:mod:`.codec`) and
GR00T N1.7's real-time chunking options (:mod:`.rtc`)."""
