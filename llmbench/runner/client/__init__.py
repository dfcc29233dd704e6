"""The request path: one HTTP/1.1 exchange per request, stamped on arrival, decoded after."""
