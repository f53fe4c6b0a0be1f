package appcode

import "time"

// Limits of the fetch lane.
const (
	// FetchRunTimeout is the run limit of one fetch handler call.
	FetchRunTimeout = 30 * time.Second
	// MaxFetchRequestBytes bounds the request body handed to fetch.
	MaxFetchRequestBytes = 1 << 20
	// MaxFetchResponseBytes bounds the body a fetch handler returns.
	MaxFetchResponseBytes = 8 << 20
)

// FetchRequest is one request of an app's HTTP lane.
type FetchRequest struct {
	Method string
	// URL is the full URL as the client asked for it, query included.
	URL string
	// Path is the part after /api, starting with "/" ("/" for /api/).
	Path   string
	Header map[string][]string // canonical keys, as net/http has them
	Body   []byte
}

// FetchResponse is what the fetch handler answered.
type FetchResponse struct {
	Status int
	Header map[string][]string
	Body   []byte
}
