package loadgen

import (
	"testing"
	"time"
)

func TestAPublishTimeIsReadFromTheEndOfTheMessageID(t *testing.T) {
	at, err := PublishedAt(messageID("ping-00017", time.Unix(0, 1764900000123456789)))
	if err != nil || at.UnixNano() != 1764900000123456789 {
		t.Fatalf("PublishedAt = %v, %v", at.UnixNano(), err)
	}
	if _, err := PublishedAt("ping-17"); err != nil {
		t.Fatalf("an id ending in digits is a time: %v", err)
	}
	if _, err := PublishedAt("ping-x"); err == nil {
		t.Fatal("an id not ending in a time was read as one")
	}
}
