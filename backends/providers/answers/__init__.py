"""What a provider answered, read and checked alike by every path (each SDK, each lean reader): an error
body put into the server's own words (:mod:`.error_body`), a streamed chunk checked for its shape
(:mod:`.stream_shape`). :mod:`backends.providers.errors` words a failure from them."""
