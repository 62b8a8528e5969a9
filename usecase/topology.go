package usecase

// Topology is the cluster every replica reports itself as to Camunda 8's
// clients: one broker, itself, leading one partition, with no replicas.
// Sutra's replicas share the database, not partitions, so a client needs
// nothing more to route a call (zbctl status, the clients' readiness
// checks).
type Topology struct {
	Brokers, Partitions, ReplicationFactor int
}

// ClusterTopology is the cluster every replica reports: each protocol adds
// the address the call came in on.
func ClusterTopology() Topology { return Topology{Brokers: 1, Partitions: 1, ReplicationFactor: 1} }
