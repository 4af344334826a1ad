package app

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// proxyV2 serves API Gateway HTTP API events with the adapter, after
// making the event's path a valid encoded URL path.
//
// An HTTP API delivers rawPath percent-DECODED (REST APIs and Function
// URLs keep it encoded). The adapter pastes rawPath into a URL and parses
// it, so a decoded "?" or "#" would cut the path, and a control character,
// a space or a bare "%" would make the parse fail: the adapter returns an
// error and API Gateway answers 500 for what a client sent. encodePath
// escapes exactly the bytes that never appear literally in an encoded
// path, so an encoded path passes unchanged and a decoded one reaches the
// handler with the ids the client sent, where the API refuses what it will
// not store (a 400 with a description).
func proxyV2(a *httpadapter.HandlerAdapterV2) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return func(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		e.RawPath = encodePath(e.RawPath)
		e.RequestContext.HTTP.Path = encodePath(e.RequestContext.HTTP.Path)
		return a.ProxyWithContext(ctx, e)
	}
}

// encodePath percent-encodes the bytes of p that an encoded URL path never
// holds literally: controls, space, '"', '#', '?', '<', '>', '\\', '^', '`',
// '{', '|', '}', bytes from 0x7F up, and a '%' not followed by two hex
// digits.
func encodePath(p string) string {
	const hex = "0123456789ABCDEF"
	var b []byte // nil until a byte needs escaping
	for i := 0; i < len(p); i++ {
		c := p[i]
		keep := literalInPath(c)
		if c == '%' {
			keep = i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2])
		}
		switch {
		case keep && b != nil:
			b = append(b, c)
		case keep:
		default:
			if b == nil {
				b = append(make([]byte, 0, len(p)+16), p[:i]...)
			}
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	if b == nil {
		return p
	}
	return string(b)
}

func literalInPath(c byte) bool {
	return c > ' ' && c < 0x7f && strings.IndexByte("\"#%<>?\\^`{|}", c) < 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
