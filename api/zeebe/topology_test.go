package zeebe_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"

	"github.com/sutra-run/worker/api/zeebe"
	"github.com/sutra-run/worker/internal/testkit"
)

func TestTopologyIsOneHealthyBrokerLeadingOnePartition(t *testing.T) {
	b := setup(t, nil)
	// A job worker's token reads the topology too (clients check it before
	// they work).
	resp, err := dial(t, b.w.GatewayAddr(), taskToken).NewTopologyCommand().Send(testkit.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ClusterSize != 1 || resp.PartitionsCount != 1 || resp.ReplicationFactor != 1 || resp.GatewayVersion != zeebe.GatewayVersion {
		t.Errorf("cluster: size %d, partitions %d, replication %d, version %q", resp.ClusterSize, resp.PartitionsCount,
			resp.ReplicationFactor, resp.GatewayVersion)
	}
	if len(resp.Brokers) != 1 {
		t.Fatalf("want one broker, got %v", resp.Brokers)
	}
	host, port, _ := net.SplitHostPort(b.w.GatewayAddr())
	br := resp.Brokers[0]
	if br.Host != host || strconv.Itoa(int(br.Port)) != port {
		t.Errorf("broker at %s:%d, the gateway listens on %s", br.Host, br.Port, b.w.GatewayAddr())
	}
	if len(br.Partitions) != 1 || br.Partitions[0].PartitionId != 1 || br.Partitions[0].Role != pb.Partition_LEADER ||
		br.Partitions[0].Health != pb.Partition_HEALTHY {
		t.Errorf("partitions: %v", br.Partitions)
	}
}
