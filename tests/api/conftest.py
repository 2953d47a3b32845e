import pytest

from api.tokens import create_token


@pytest.fixture
def token(user):
    return create_token(user=user, name="tests")[1]


@pytest.fixture
def api(client, token):
    """The Django test client, authenticated with a Bearer token, speaking JSON."""

    class Api:
        def __init__(self, token):
            self.headers = {"Authorization": f"Bearer {token}"}

        def get(self, path, headers=None, **params):
            return client.get(f"/api/v1{path}", params, headers={**self.headers, **(headers or {})})

        def post(self, path, body=None, **extra):
            return client.post(
                f"/api/v1{path}",
                body or {},
                content_type="application/json",
                headers={**self.headers, **extra},
            )

    return Api(token)
