"""Reference clients with documented failure behaviour (the Jepsen client role).

Cases use them where the requirement is about what a correct client and the broker achieve together,
e.g. the reconnecting transacted producer and consumer of the AMQ JMS failover seed.
"""
