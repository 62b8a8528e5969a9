package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client calls the worker's admin API.
type client struct {
	base   string // without a trailing slash
	token  string
	caller string
	http   *http.Client
}

// An admin call claims at most one instance and never waits for a claim, so
// anything slower than this is a server or network in trouble.
const callTimeout = 30 * time.Second

// newClient checks base (SUTRA_API_URL) before anything is sent: a URL
// without a scheme would otherwise fail as an unreachable server.
func newClient(base, token, caller string) (*client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("SUTRA_API_URL %q: want http://host:port or https://host:port", base)
	}
	return &client{base: strings.TrimRight(base, "/"), token: token, caller: caller,
		http: &http.Client{Timeout: callTimeout}}, nil
}

// apiError is a refusal the API answered: a problem document, or whatever a
// proxy in front of it sent.
type apiError struct {
	status     int
	code       string
	detail     string
	instanceID string
	elementID  string
	retryAfter string
	body       string // when the answer was not a problem document
}

func (e *apiError) Error() string {
	if e.code != "" {
		return e.code + ": " + e.detail
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.status, http.StatusText(e.status), e.body)
}

// unreachableError says the server did not answer at all.
type unreachableError struct {
	url string
	err error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach the Sutra API at %s: %v", e.url, e.err)
}

// call sends one request and returns the body of a 2xx answer. path is
// already escaped. body, when not nil, is sent with contentType.
func (c *client) call(ctx context.Context, method, path string, query url.Values, body []byte, contentType string) ([]byte, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, err
	}
	switch {
	case body != nil:
		req.Header.Set("Content-Type", contentType)
	case method != http.MethodGet:
		// The worker takes a state-changing call only as JSON, with a body
		// or without (no browser form can send that from another page).
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", "sutractl")
	req.Header.Set("X-Sutra-Caller", c.caller)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &unreachableError{url: c.base, err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &unreachableError{url: c.base, err: err}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return data, nil
	}
	return nil, refusal(resp, data)
}

// callJSON sends v as a JSON body (none when v is nil).
func (c *client) callJSON(ctx context.Context, method, path string, query url.Values, v any) ([]byte, error) {
	var body []byte
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	return c.call(ctx, method, path, query, body, "application/json")
}

func refusal(resp *http.Response, data []byte) *apiError {
	e := &apiError{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var p struct {
		Code       string `json:"code"`
		Detail     string `json:"detail"`
		InstanceID string `json:"instance_id"`
		ElementID  string `json:"element_id"`
	}
	if (mt == "application/problem+json" || mt == "application/json") && json.Unmarshal(data, &p) == nil && p.Code != "" {
		e.code, e.detail, e.instanceID, e.elementID = p.Code, p.Detail, p.InstanceID, p.ElementID
		return e
	}
	// Not ours (a proxy, a load balancer): show its start, on one line.
	text := strings.Join(strings.Fields(string(data)), " ")
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	e.body = text
	return e
}

// seg escapes one path segment: instance ids may hold any character.
func seg(s string) string { return url.PathEscape(s) }
