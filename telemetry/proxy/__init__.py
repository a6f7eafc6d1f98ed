"""What ``ttft proxy`` learns from traffic it did not send: each call's shape and the app's sessions."""
