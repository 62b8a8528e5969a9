package broker

import (
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Nodes splits a broker URL, or a comma-separated list of the URLs of one
// cluster's nodes, into its URLs. The nodes of a cluster share one set of
// users and virtual hosts, so the URLs must name the same virtual host
// with the same credentials: a list that mixes them is refused, since the
// worker would otherwise declare its topology and consume somewhere else
// after a failover.
func Nodes(list string) ([]string, error) {
	var nodes []string
	var first amqp.URI
	for i, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return nil, fmt.Errorf("URL %d of the list is empty", i+1)
		}
		u, err := amqp.ParseURI(raw)
		if err != nil {
			return nil, fmt.Errorf("URL %d of the list: %w", i+1, err)
		}
		switch {
		case i == 0:
			first = u
		case u.Vhost != first.Vhost:
			return nil, fmt.Errorf("URL %d names virtual host %q, URL 1 %q: the nodes of one cluster are one virtual host", i+1, u.Vhost, first.Vhost)
		case u.Username != first.Username || u.Password != first.Password:
			return nil, fmt.Errorf("URL %d has other credentials than URL 1: the nodes of one cluster share their users", i+1)
		}
		nodes = append(nodes, raw)
	}
	return nodes, nil
}

// nodeAddress is where rawURL (parsed by Nodes) points, without its
// credentials, for the logs.
func nodeAddress(rawURL string) string {
	u, err := amqp.ParseURI(rawURL)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%s:%d", u.Host, u.Port)
}
