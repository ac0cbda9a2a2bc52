"""The ``openpi`` wire: openpi's websocket protocol with msgpack arrays, both ways: a client chunk model of an openpi
policy server (:mod:`.client`) and a server openpi's own client can call (:mod:`.server`)."""
