package zeebe

import (
	"context"
	"net"
	"os"
	"strconv"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc/peer"

	"github.com/sutra-run/worker/usecase"
)

// GatewayVersion is the Zeebe version whose gateway protocol this gateway
// serves (the pb package's module, v8.4.0): clients compare it with their
// own.
const GatewayVersion = "8.4.0"

// Topology answers that the cluster is this replica alone
// (usecase.ClusterTopology): one healthy broker leading each partition.
func (g *Gateway) Topology(ctx context.Context, _ *pb.TopologyRequest) (*pb.TopologyResponse, error) {
	host, port := g.advertised(ctx)
	t := usecase.ClusterTopology()
	var parts []*pb.Partition
	for p := 1; p <= t.Partitions; p++ {
		parts = append(parts, &pb.Partition{PartitionId: int32(p), Role: pb.Partition_LEADER, Health: pb.Partition_HEALTHY})
	}
	return &pb.TopologyResponse{
		Brokers:     []*pb.BrokerInfo{{NodeId: 0, Host: host, Port: port, Version: GatewayVersion, Partitions: parts}},
		ClusterSize: int32(t.Brokers), PartitionsCount: int32(t.Partitions), ReplicationFactor: int32(t.ReplicationFactor),
		GatewayVersion: GatewayVersion,
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
