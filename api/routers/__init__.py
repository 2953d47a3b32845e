"""The API's endpoints, one django-ninja Router per resource; api.api adds them in the order
the OpenAPI document lists their paths."""
