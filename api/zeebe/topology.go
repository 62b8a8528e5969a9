package zeebe

import (
	"context"
	"net"
	"os"
	"strconv"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/peer"
)

// GatewayVersion is the Zeebe version whose gateway protocol this gateway
// serves (the pb package's module, v8.4.0): clients compare it with their
// own.
const GatewayVersion = "8.4.0"

// Topology answers that the cluster is this replica alone: one healthy
// broker leading partition 1, of a cluster of size 1, one partition,
// replication factor 1. Every replica answers so; Sutra's replicas share
// the database, not Zeebe's partitions, so a client needs nothing more to
// route a call (zbctl status, the clients' readiness checks).
func (g *Gateway) Topology(ctx context.Context, _ *pb.TopologyRequest) (*pb.TopologyResponse, error) {
	host, port := g.advertised(ctx)
	return &pb.TopologyResponse{
		Brokers: []*pb.BrokerInfo{{
			NodeId: 0, Host: host, Port: port, Version: GatewayVersion,
			Partitions: []*pb.Partition{{PartitionId: 1, Role: pb.Partition_LEADER, Health: pb.Partition_HEALTHY}},
		}},
		ClusterSize: 1, PartitionsCount: 1, ReplicationFactor: 1, GatewayVersion: GatewayVersion,
	}, nil
}

// advertised is the broker's host and port as a client reaches it: the
// listener's address, or, when it listens on every interface, the address
// the call came in on (else the host name).
func (g *Gateway) advertised(ctx context.Context) (string, int32) {
	host, portText, _ := net.SplitHostPort(g.Addr())
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = ""
		if p, ok := peer.FromContext(ctx); ok && p.LocalAddr != nil {
			host, _, _ = net.SplitHostPort(p.LocalAddr.String())
		}
		if host == "" {
			host, _ = os.Hostname()
		}
	}
	port, _ := strconv.ParseInt(portText, 10, 32)
	return host, int32(port)
}
