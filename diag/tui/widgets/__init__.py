"""Small display widgets shared by the views."""
